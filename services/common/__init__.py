"""What every Kishpa gRPC service shares: settings, auth, error mapping, server bootstrap, logs."""
