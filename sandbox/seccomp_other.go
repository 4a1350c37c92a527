//go:build linux && !amd64

package sandbox

// archDenied are the administrator-only calls of this architecture only.
var archDenied []uintptr

// archMknod are this architecture's mknod calls with the mode second.
var archMknod []uintptr
