//! XOR delta against block 0 (section 3.4) and precision truncation (section 3.5).
