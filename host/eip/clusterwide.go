package eip

import "errors"

// ClusterWideError is a failure that concerns every Service alike (the
// placement policy cannot be evaluated at all). Whoever returns it has
// reported it once for the cluster (host/clusterevent), so Ensure records
// no Event on the Service: with 10,000 Services, one per Service and retry
// would bury everything else.
type ClusterWideError struct{ Err error }

func (e *ClusterWideError) Error() string { return e.Err.Error() }
func (e *ClusterWideError) Unwrap() error { return e.Err }

func isClusterWide(err error) bool {
	var cw *ClusterWideError
	return errors.As(err, &cw)
}
