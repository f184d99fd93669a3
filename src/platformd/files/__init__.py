"""
Files the daemon reads and writes: strict decoding of versioned configuration files,
kubeconfig files and client key pairs, files polled for changes, the data directory's
private files and the cluster's own PKI.
"""
