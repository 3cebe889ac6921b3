// Package redact removes passwords of URLs (scheme://user:password@host)
// from text that is printed or logged: config values echoed in errors,
// reports and logs. It is not a general secret scanner: keys and tokens in
// their own config fields are kept out of messages by the code that reads
// them.
package redact

import (
	"io"
	"net/url"
	"regexp"
)

// Mask replaces a password.
const Mask = "xxxxx"

// userinfoPassword matches scheme://user:password@ up to the password's
// end, keeping scheme://user in group 1.
var userinfoPassword = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.\-]*://[^\s/?#@:"'\\]*):[^\s/?#@"'\\]*@`)

// Text returns s with the password of every URL in it replaced by Mask.
func Text(s string) string {
	return userinfoPassword.ReplaceAllString(s, "${1}:"+Mask+"@")
}

// URL returns the URL raw with its password replaced by Mask, for a config
// value that should be one (a malformed one is redacted as text).
func URL(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	return Text(raw)
}

// Writer redacts what is written to it with Text, one Write at a time
// (each Write of a logger or of fmt.Fprint* is one message), and passes it
// to w.
func Writer(w io.Writer) io.Writer { return writer{w} }

type writer struct{ w io.Writer }

func (r writer) Write(p []byte) (int, error) {
	if !userinfoPassword.Match(p) {
		return r.w.Write(p)
	}
	if _, err := io.WriteString(r.w, Text(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}
