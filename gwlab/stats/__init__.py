"""Pure-numpy statistics that frames imports the way it imports wire: no pandas, no I/O."""
