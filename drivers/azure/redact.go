package azure

import (
	"errors"
	"net/url"
	"strings"
)

// withoutQuery returns u without its query string, where a SAS token (or a
// connection string's SharedAccessSignature) travels: errors and logs name
// the container, never the signature.
func withoutQuery(u string) string {
	if i := strings.IndexByte(u, '?'); i >= 0 {
		return u[:i]
	}
	return u
}

// redactErr strips the query string from the URL of every *url.Error in
// err's chain (the HTTP client puts the full request URL, SAS included, in
// its transport errors) and returns err.
func redactErr(err error) error {
	for e := err; e != nil; {
		var ue *url.Error
		if !errors.As(e, &ue) {
			break
		}
		ue.URL = withoutQuery(ue.URL)
		e = ue.Err
	}
	return err
}
