"""The soak and chaos harness behind benches/soak.py."""
