"""The host-program IR: launches, syncs, programs, their text and S-expression forms."""
