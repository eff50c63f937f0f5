"""Pure-numpy statistics that frames imports as it imports wire: no pandas, no I/O."""
