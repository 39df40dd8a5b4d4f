module libguestfs.org/libnbd

go 1.26.0
