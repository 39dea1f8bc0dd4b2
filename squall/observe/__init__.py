"""What a running topology tells its user: stats per component, errors, progress."""
