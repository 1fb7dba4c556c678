"""The Element-like test client: matrix-js-sdk on Node, driven over JSON lines."""
