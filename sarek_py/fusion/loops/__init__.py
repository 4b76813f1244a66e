"""Loop-level passes on host programs: inlining, producer-consumer fusion, ping-pong, cost."""
