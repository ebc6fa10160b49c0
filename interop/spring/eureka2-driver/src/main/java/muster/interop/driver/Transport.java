package muster.interop.driver;

import com.netflix.appinfo.ApplicationInfoManager;
import com.netflix.discovery.DiscoveryClient;
import com.netflix.discovery.EurekaClientConfig;
import com.netflix.discovery.Jersey3DiscoveryClientOptionalArgs;
import com.netflix.discovery.shared.transport.jersey3.Jersey3TransportClientFactories;
import com.netflix.spectator.api.DefaultRegistry;
import com.netflix.spectator.api.Spectator;

/** eureka-client 2.0's Jersey 3 transport (eureka-client-jersey3). */
final class Transport {
    static final String NAME = "Jersey3TransportClientFactories";

    /**
     * eureka-client 2.0 counts re-registrations and hashcode mismatches in Spectator's global
     * registry, which holds no registry of its own (its counters stay 0) until one is added.
     */
    static void init() {
        Spectator.globalRegistry().add(new DefaultRegistry());
    }

    static DiscoveryClient newClient(ApplicationInfoManager aim, EurekaClientConfig config) {
        return new DiscoveryClient(aim, config, Jersey3TransportClientFactories.getInstance(),
                new Jersey3DiscoveryClientOptionalArgs());
    }

    private Transport() {}
}
