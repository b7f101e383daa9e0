#!/usr/bin/env node
// Prints the probe digests of js/test/unicode-probe.js as JSON (tests/test_js_runtime.py compares them to Python's).
import { probeDigests } from './unicode-probe.js';

console.log(JSON.stringify(await probeDigests()));
