"""Critical path view: the chain of CPU and GPU dependencies that decided when each step ended, by cause."""
