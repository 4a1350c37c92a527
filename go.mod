module github.com/agentexec/agentexec

go 1.26.0

require golang.org/x/sys v0.49.0

require go.uber.org/goleak v1.3.0 // indirect
