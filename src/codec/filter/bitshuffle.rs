//! Bit shuffle and unshuffle (section 3.3), with the Blosc1 and Blosc2 block rules.
