{
  "targets": [
    {
      "target_name": "sluice",
      "sources": ["src/addon.c", "src/request.c", "src/answer.c"],
      "cflags_c": ["-std=gnu11", "<!@(pkg-config --cflags sluice)"],
      "libraries": [
        "<!@(pkg-config --libs sluice)",
        "-Wl,-rpath,<!(pkg-config --variable=libdir sluice)"
      ]
    }
  ]
}
