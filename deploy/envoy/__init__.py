"""Envoy as the production gRPC-Web edge: its configuration and the generator of its routes."""
