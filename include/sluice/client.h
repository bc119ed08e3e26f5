/* sluice/client.h -- placeholder until the client layer lands. */
#ifndef SLUICE_CLIENT_H
#define SLUICE_CLIENT_H
#endif
