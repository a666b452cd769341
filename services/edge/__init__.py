"""The browser edge: gRPC-Web (binary and text) to gRPC, and the web client's files."""
