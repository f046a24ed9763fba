module github.com/idemhook/idemhook

go 1.26.8
