# Muster in an image with nothing but statically linked binaries: the
# server (/muster) and the simulated Eureka clients that docker-compose and
# the chaos suite run from the same image (/muster-clients, tools/clients).
# Build it with scripts/build-image.sh, which compiles both (CGO_ENABLED=0)
# into build/image/ and uses that folder as the context: no base image is
# pulled.
FROM scratch
COPY muster /muster
COPY muster-clients /muster-clients
# 8761: Eureka API, dashboard, /metrics; 7946: memberlist gossip (TCP and UDP).
EXPOSE 8761 7946 7946/udp
# The binary probes its own /readyz, so healthchecks need no shell or curl.
HEALTHCHECK --interval=5s --timeout=3s --start-period=5s --retries=3 CMD ["/muster", "health"]
ENTRYPOINT ["/muster"]
CMD ["serve"]
