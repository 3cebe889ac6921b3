package bench

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/stratastream/strata/stream/chunked"
)

// requestKind maps one Prometheus sample (metric name and labels) to a
// request kind: put, get, head, list, delete, or "" for a sample that is
// not a request count.
type requestKind func(name string, labels map[string]string) string

// brokerRequestKind reads strata serve's strata_backend_requests_total
// (every driver summed).
func brokerRequestKind(name string, labels map[string]string) string {
	if name != "strata_backend_requests_total" {
		return ""
	}
	return labels["op"]
}

// minioRequestKind reads MinIO's S3 request counters by API: v3's
// minio_api_requests_total{name="PutObject",type="s3"} (the metrics v3
// endpoint /minio/metrics/v3/api/requests, current to the second) or v2's
// minio_s3_requests_total{api="putobject"} (/minio/v2/metrics/cluster,
// which MinIO caches for about 10 s). Object writes are puts, object
// reads gets, HEADs heads, listings lists and deletions deletes.
func minioRequestKind(name string, labels map[string]string) string {
	var api string
	switch name {
	case "minio_s3_requests_total":
		api = labels["api"]
	case "minio_api_requests_total":
		if t := labels["type"]; t != "" && t != "s3" {
			return ""
		}
		api = strings.ToLower(labels["name"])
	default:
		return ""
	}
	switch {
	case strings.HasPrefix(api, "put"), strings.HasPrefix(api, "copy"),
		api == "newmultipartupload", api == "completemultipartupload":
		return "put"
	case strings.HasPrefix(api, "get"), strings.HasPrefix(api, "select"):
		return "get"
	case strings.HasPrefix(api, "head"):
		return "head"
	case strings.HasPrefix(api, "list"):
		return "list"
	case strings.HasPrefix(api, "delete"), api == "abortmultipartupload":
		return "delete"
	}
	return ""
}

// promStats returns a reader of the request counts in a Prometheus text
// endpoint, sent token as a bearer token when not empty. A failed scrape
// repeats the last good reading and says false.
func promStats(ctx context.Context, url, token string, kind requestKind) func() (chunked.RequestStats, bool) {
	client := &http.Client{Timeout: 10 * time.Second}
	var (
		mu   sync.Mutex
		last chunked.RequestStats
	)
	return func() (chunked.RequestStats, bool) {
		v, err := scrapeRequests(context.WithoutCancel(ctx), client, url, token, kind)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			return last, false
		}
		last = v
		return v, true
	}
}

// scrapeRequests reads url once and sums its request counts by kind.
func scrapeRequests(ctx context.Context, client *http.Client, url, token string, kind requestKind) (chunked.RequestStats, error) {
	var st chunked.RequestStats
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return st, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return st, fmt.Errorf("metrics %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return st, fmt.Errorf("metrics %s: HTTP %d: %s", url, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return parseRequests(resp.Body, kind)
}

// parseRequests sums the samples of a Prometheus text exposition by kind.
func parseRequests(r io.Reader, kind requestKind) (chunked.RequestStats, error) {
	var st chunked.RequestStats
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, labels, value, ok := parseSample(line)
		if !ok {
			continue
		}
		n := int64(value)
		switch kind(name, labels) {
		case "put":
			st.Puts += n
		case "get":
			st.Gets += n
		case "head":
			st.Heads += n
		case "list":
			st.Lists += n
		case "delete":
			st.Deletes += n
		}
	}
	return st, sc.Err()
}

// parseSample splits one sample line: name{k="v",...} value [timestamp].
func parseSample(line string) (name string, labels map[string]string, value float64, ok bool) {
	labels = map[string]string{}
	rest := line
	if i := strings.IndexAny(line, "{ "); i < 0 {
		return "", nil, 0, false
	} else {
		name, rest = line[:i], line[i:]
	}
	if strings.HasPrefix(rest, "{") {
		rest = rest[1:]
		for {
			rest = strings.TrimLeft(rest, " ,")
			if strings.HasPrefix(rest, "}") {
				rest = rest[1:]
				break
			}
			eq := strings.IndexByte(rest, '=')
			if eq < 0 || len(rest) < eq+2 || rest[eq+1] != '"' {
				return "", nil, 0, false
			}
			k := rest[:eq]
			rest = rest[eq+2:]
			var v strings.Builder
			closed := false
			for i := 0; i < len(rest); i++ {
				switch c := rest[i]; {
				case c == '\\' && i+1 < len(rest):
					i++
					v.WriteByte(rest[i])
				case c == '"':
					rest, closed = rest[i+1:], true
				default:
					v.WriteByte(c)
				}
				if closed {
					break
				}
			}
			if !closed {
				return "", nil, 0, false
			}
			labels[k] = v.String()
		}
	}
	f := strings.Fields(rest)
	if len(f) == 0 {
		return "", nil, 0, false
	}
	value, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return "", nil, 0, false
	}
	return name, labels, value, true
}

// minioToken is the bearer token MinIO's metrics endpoints take by
// default (MINIO_PROMETHEUS_AUTH_TYPE=jwt): an HS512 JWT for the access
// key, signed with its secret key, as `mc admin prometheus generate`
// makes it.
func minioToken(accessKey, secretKey string) (string, error) {
	if accessKey == "" || secretKey == "" {
		return "", errors.New("MinIO metrics: need the access key and secret key (STRATA_MINIO_ACCESS_KEY, STRATA_MINIO_SECRET_KEY as testbed/up minio prints them)")
	}
	enc := base64.RawURLEncoding
	header := enc.EncodeToString([]byte(`{"alg":"HS512","typ":"JWT"}`))
	claims, err := json.Marshal(map[string]any{"exp": time.Now().Add(24 * time.Hour).Unix(), "sub": accessKey, "iss": "prometheus"})
	if err != nil {
		return "", err
	}
	msg := header + "." + enc.EncodeToString(claims)
	mac := hmac.New(sha512.New, []byte(secretKey))
	mac.Write([]byte(msg))
	return msg + "." + enc.EncodeToString(mac.Sum(nil)), nil
}

// procIO is a process's storage writes and CPU time so far (Linux).
type procIO struct {
	writeBytes int64
	cpu        time.Duration
	ok         bool
}

// readProcIO reads /proc/PID/io's write_bytes and /proc/PID/stat's utime
// and stime (in clock ticks of 100 Hz, USER_HZ on every Linux port).
func readProcIO(pid int) (procIO, error) {
	var p procIO
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return p, err
	}
	found := false
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "write_bytes:"); ok {
			if p.writeBytes, err = strconv.ParseInt(strings.TrimSpace(v), 10, 64); err != nil {
				return p, fmt.Errorf("process %d: write_bytes: %w", pid, err)
			}
			found = true
		}
	}
	if !found {
		return p, fmt.Errorf("process %d: no write_bytes in /proc/%d/io", pid, pid)
	}
	b, err = os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return p, err
	}
	// The command name (field 2) may hold spaces: fields count from its ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return p, fmt.Errorf("process %d: no command name in /proc/%d/stat", pid, pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return p, fmt.Errorf("process %d: short /proc/%d/stat", pid, pid)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return p, fmt.Errorf("process %d: cpu times: %w", pid, err)
	}
	p.cpu = time.Duration(utime+stime) * 10 * time.Millisecond
	p.ok = true
	return p, nil
}

// rss returns the resident bytes of process pid (VmRSS, Linux).
func rss(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) >= 1 {
				kb, err := strconv.ParseInt(f[0], 10, 64)
				return kb << 10, err
			}
		}
	}
	return 0, fmt.Errorf("process %d: no VmRSS in /proc/%d/status", pid, pid)
}

// fileKind names what a file under a data directory belongs to. In an
// nfs driver's directory (objects/NAME@/…/NAME.stream@/…) it is the
// stream's last name component ("_wal" for every write-ahead stream),
// a slash, and the file's part of the stream: its directory for numbered
// files ("c" chunks, "m" chunk metadata, "g" generations), else its name
// ("hint"): "data.d/c", "meta.m/m", "_wal/c" (a data stream's
// incarnation tag left out). Elsewhere it is the
// file's extension (Kafka: ".log", ".index") or "other".
func fileKind(rel string) string {
	parts := strings.Split(filepath.ToSlash(rel), "/")
	for i, p := range parts {
		parts[i] = strings.TrimSuffix(p, "@")
	}
	stream := ""
	for _, p := range parts {
		if strings.HasPrefix(p, "_wal") {
			stream = "_wal"
			break
		}
		if k, ok := strings.CutSuffix(p, ".stream"); ok {
			stream = untagged(k)
		}
	}
	if stream != "" {
		last := parts[len(parts)-1]
		if strings.Trim(last, "0123456789") == "" && len(parts) >= 2 {
			last = parts[len(parts)-2]
		}
		return stream + "/" + last
	}
	if ext := filepath.Ext(rel); ext != "" && len(ext) <= 12 {
		return ext
	}
	return "other"
}

// untagged drops the incarnation tag of a stream set's data stream
// ("data.0123456789abcdef.d" is "data.d"), so that all partitions' data
// streams are one kind.
func untagged(name string) string {
	stem, ok := strings.CutSuffix(name, ".d")
	if i := strings.LastIndexByte(stem, '.'); ok && i >= 0 && len(stem)-i-1 == 16 && strings.Trim(stem[i+1:], "0123456789abcdef") == "" {
		return stem[:i] + ".d"
	}
	return name
}

// diskUsage returns the allocated bytes (st_blocks), the apparent bytes
// and the regular files under dir, and the allocated bytes and files by
// fileKind. Files that vanish during the walk (a compaction deleting
// them) are skipped.
func diskUsage(dir string) (alloc, apparent, files int64, kinds map[string]DiskKind, err error) {
	kinds = map[string]DiskKind{}
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		fi, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		a := fi.Size()
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			a = st.Blocks * 512
		}
		files++
		apparent += fi.Size()
		alloc += a
		rel, _ := filepath.Rel(dir, path)
		k := kinds[fileKind(rel)]
		k.Bytes += a
		k.Files++
		kinds[fileKind(rel)] = k
		return nil
	})
	return alloc, apparent, files, kinds, err
}

// settleDisk measures dir when the runs ended and again after settle.
func settleDisk(ctx context.Context, dir string, recordBytes int64, settle time.Duration, progress io.Writer, label string) (*Disk, error) {
	before, _, _, _, err := diskUsage(dir)
	if err != nil {
		return nil, err
	}
	if settle > 0 {
		if progress != nil {
			fmt.Fprintf(progress, "\r\033[K%s [settling %v before measuring %s]", label, settle, dir)
		}
		select {
		case <-time.After(settle):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	after, apparent, files, kinds, err := diskUsage(dir)
	if err != nil {
		return nil, err
	}
	d := &Disk{RecordBytes: recordBytes, Before: before, After: after, Apparent: apparent, Files: files, Kinds: kinds}
	if recordBytes > 0 {
		d.Ratio = float64(after) / float64(recordBytes)
	}
	return d, nil
}
