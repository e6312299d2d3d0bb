"""The inspection worker: processes inspection data cast by the API over the message bus."""
