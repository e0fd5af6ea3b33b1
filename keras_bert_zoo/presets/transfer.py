"""Fetching one file over HTTP(S) with a progress bar and its sha256, and the mirror setting.

Shared by the Google-archive downloads (`downloads`) and the Hugging Face file sets (`hub`).
`urllib` and `tqdm` rather than `huggingface_hub` or `requests`: one streamed GET is all that
is needed, and neither library is a dependency of the package.
"""

import hashlib
import urllib.parse
import urllib.request
from pathlib import Path

from tqdm.auto import tqdm

MIRROR_ENV = "KBZ_WEIGHTS_MIRROR"
_TIMEOUT_S = 60


def download(url: str, destination: Path) -> str:
    """Streams `url` into `destination` with a progress bar; returns the sha256 (hex).

    Raises OSError (URLError included) when the server cannot be reached or the transfer
    stops short.
    """
    if urllib.parse.urlparse(url).scheme not in ("https", "http", "file"):
        raise OSError(f"unsupported URL scheme in {url!r}")
    digest, size = hashlib.sha256(), 0
    request = urllib.request.Request(url, headers={"User-Agent": "keras-bert-zoo"})
    with urllib.request.urlopen(request, timeout=_TIMEOUT_S) as response:
        total = int(response.headers.get("Content-Length") or 0) or None
        with (
            open(destination, "wb") as out,
            tqdm(
                total=total,
                unit="B",
                unit_scale=True,
                unit_divisor=1024,
                desc=destination.name,
                disable=None,
            ) as bar,
        ):
            for block in iter(lambda: response.read(1 << 20), b""):
                out.write(block)
                digest.update(block)
                size += len(block)
                bar.update(len(block))
    if total is not None and size != total:
        raise OSError(f"the transfer stopped after {size} of {total} bytes")
    return digest.hexdigest()
