// Package yamlconf decodes the project's config documents (YAML, or JSON as
// a subset of YAML) strictly, without ever quoting a config value in an
// error: values may be secrets (keys, SAS tokens, passwords).
package yamlconf

import (
	"bytes"
	"errors"
	"io"
	"regexp"

	"gopkg.in/yaml.v3"
)

// quotedValue matches the snippets of values yaml.v3 puts in its errors
// ("cannot unmarshal !!str `abcdefg...` into ...").
var quotedValue = regexp.MustCompile("`[^`]*`")

// Decode decodes data into v; a field v does not have is an error. An empty
// document returns io.EOF unchanged. Other errors keep yaml's line numbers
// and types but not the values.
func Decode(data []byte, v any) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	err := dec.Decode(v)
	if err == nil || errors.Is(err, io.EOF) {
		return err
	}
	return errors.New(quotedValue.ReplaceAllString(err.Error(), "(value hidden)"))
}
