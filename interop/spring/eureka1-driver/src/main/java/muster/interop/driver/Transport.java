package muster.interop.driver;

import com.netflix.appinfo.ApplicationInfoManager;
import com.netflix.discovery.DiscoveryClient;
import com.netflix.discovery.EurekaClientConfig;

/** eureka-client 1.10's own transport, Jersey 1 (what a DiscoveryClient uses unless told otherwise). */
final class Transport {
    static final String NAME = "Jersey1TransportClientFactories";

    /** eureka-client 1.10 counts in Servo, whose counters count from the start. */
    static void init() {}

    static DiscoveryClient newClient(ApplicationInfoManager aim, EurekaClientConfig config) {
        return new DiscoveryClient(aim, config, new DiscoveryClient.DiscoveryClientOptionalArgs());
    }

    private Transport() {}
}
