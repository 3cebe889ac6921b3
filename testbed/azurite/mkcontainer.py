#!/usr/bin/env python3
"""mkcontainer.py ENDPOINT ACCOUNT KEY CONTAINER: creates a blob container
with a Shared Key signed request (standard library only, so the testbed needs
no SDK). An existing container is fine. Exit status 0 on success."""
import base64, hashlib, hmac, sys, urllib.error, urllib.parse, urllib.request
from email.utils import formatdate

endpoint, account, key, container = sys.argv[1:5]
url = f"{endpoint.rstrip('/')}/{container}?restype=container"
headers = {"x-ms-date": formatdate(usegmt=True), "x-ms-version": "2021-12-02"}
path = urllib.parse.urlparse(url).path
to_sign = "\n".join(
    ["PUT", "", "", "", "", "application/octet-stream"] + [""] * 6  # up to Range
    + [f"{k}:{headers[k]}" for k in sorted(headers)]
    + [f"/{account}{path}\nrestype:container"]
)
sig = base64.b64encode(hmac.new(base64.b64decode(key), to_sign.encode(), hashlib.sha256).digest()).decode()
headers["Authorization"] = f"SharedKey {account}:{sig}"
headers["Content-Type"] = "application/octet-stream"
req = urllib.request.Request(url, method="PUT", headers=headers, data=b"")
try:
    with urllib.request.urlopen(req, timeout=10) as r:
        print(f"testbed: container {container} created ({r.status})", file=sys.stderr)
except urllib.error.HTTPError as e:
    if e.code == 409:
        print(f"testbed: container {container} exists", file=sys.stderr)
    else:
        sys.exit(f"testbed: error: create container {container}: HTTP {e.code}: {e.read()[:500]!r}")
except OSError as e:
    sys.exit(f"testbed: error: create container {container}: {e}")
