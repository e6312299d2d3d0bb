"""Ironic's versioned notifications: the queue listener, the payload parser, the follower."""
