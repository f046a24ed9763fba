JSON.stringify({ status: 'rejected', code: $json.signatureCheck?.code || 'invalid_signature', error: $json.signatureCheck?.reason || 'no signature matches the body and secret' })
