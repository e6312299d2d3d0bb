"""What the filter shares with its clients (the inspection service): MACs, messaging, database,
systemd, configuration loading and logging. Nothing here imports the rest of the filter."""
