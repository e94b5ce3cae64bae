package auth

// SetNonce fixes the server nonce (the RFC 7677 vector's).
func (s *Server) SetNonce(n string) { s.nonce = func() string { return n } }
