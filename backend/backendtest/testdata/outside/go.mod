module example.com/outside

go 1.25.0

require github.com/polygateway/polygateway v0.0.0-00010101000000-000000000000

replace github.com/polygateway/polygateway => ../../../..
