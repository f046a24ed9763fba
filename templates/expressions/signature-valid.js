((check, expected) => {
  if (check === null || typeof check !== 'object' || check.code) return false;
  const e = String(expected);
  const candidates = Array.isArray(check.candidates) ? check.candidates : [];
  return candidates.reduce((found, c) => found | (typeof c === 'string' && c.length === e.length &&
    c.split('').reduce((diff, ch, i) => diff | (ch.charCodeAt(0) ^ e.charCodeAt(i)), 0) === 0 ? 1 : 0), 0) === 1;
})($json.signatureCheck, $json.expectedSignature)
