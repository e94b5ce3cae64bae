package kafka

// SecurityMeta exposes the server's security metadata to the tests, to
// check what the admin APIs stored.
func (s *Server) SecurityMeta() SecurityMetadata { return s.meta }
