//go:build !unix

package plugin

import "errors"

// newDataPair: the data channel needs Unix socket pairs; elsewhere every
// call uses the go-plugin connection.
func newDataPair() (*dataPair, error) {
	return nil, errors.New("no data channel on this platform")
}
