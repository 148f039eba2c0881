//! BloscLZ stream decoder (section 4.5).
