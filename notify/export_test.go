package notify

// SetAfterPass tells f of each pass s makes under the lease (tests only).
func SetAfterPass(s *Sender, f func()) { s.afterPass = f }
