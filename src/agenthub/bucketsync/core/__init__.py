"""The kernel: the Hub, access rules, naming, records, the read model and the in-process
state every slice shares. Imports the ports' base modules only."""
