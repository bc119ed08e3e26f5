/* sluice/http.h -- placeholder until the http layer lands. */
#ifndef SLUICE_HTTP_H
#define SLUICE_HTTP_H
#endif
