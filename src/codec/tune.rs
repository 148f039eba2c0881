//! Blocksize selection and the split decision, as C-Blosc2 3.3.x and C-Blosc 1.x make them
//! (sections 2.10-2.12).
