module github.com/configward/configward/test/tools/importgroups

go 1.26.0
