//! BloscLZ stream encoder, byte-exact with C-Blosc2 3.3.x and C-Blosc 1.21 (section 4.6).
