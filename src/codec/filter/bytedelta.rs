//! Bytedelta (id 35) and the old bytedelta (id 34) (section 3.5b).
