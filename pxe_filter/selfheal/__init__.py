"""Self-healing hostsdir: the inotify watcher and the healer that puts files back."""
