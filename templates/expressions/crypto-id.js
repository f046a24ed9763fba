(() => {
  const b = $('Webhook').item.json.body;
  const id = b !== null && typeof b === 'object' && !Array.isArray(b) ? b.id : undefined;
  if (typeof id !== 'string' || id.length === 0) return null;
  if (/[\u0000-\u001f\u007f]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(id)) return null;
  if (encodeURIComponent(id).replace(/%[0-9A-F]{2}/g, '.').length > 255) return null;
  return id;
})()
