module github.com/agentexec/agentexec/deploy/image

go 1.26.0
