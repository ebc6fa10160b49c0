package muster.interop.client;

import com.netflix.appinfo.ApplicationInfoManager;
import com.netflix.appinfo.InstanceInfo;
import com.netflix.discovery.AbstractDiscoveryClientOptionalArgs;
import com.netflix.discovery.DiscoveryClient;
import com.netflix.discovery.EurekaClient;
import com.netflix.discovery.shared.Application;
import com.netflix.discovery.shared.Applications;
import java.lang.reflect.Field;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.springframework.aop.framework.Advised;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.context.event.ApplicationReadyEvent;
import org.springframework.cloud.client.ServiceInstance;
import org.springframework.cloud.client.loadbalancer.LoadBalancerClient;
import org.springframework.context.event.EventListener;
import org.springframework.core.env.Environment;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestParam;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.client.RestClientResponseException;
import org.springframework.web.client.RestTemplate;

/**
 * The test's window into the app: the registry as this client fetched it, its re-registration and
 * hashcode-mismatch counters, its own status and metadata. Status overrides go through Spring's
 * /actuator/serviceregistry instead, as they do in production.
 */
@RestController
public class ControlController {
    private final EurekaClient eureka;
    private final ApplicationInfoManager infoManager;
    private final org.springframework.cloud.client.discovery.DiscoveryClient discovery;
    private final ObjectProvider<AbstractDiscoveryClientOptionalArgs<?>> transport;
    private final Environment env;
    private final LoadBalancerClient loadBalancer;
    private final RestTemplate loadBalanced;
    private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2)).build();

    public ControlController(EurekaClient eureka, ApplicationInfoManager infoManager,
            org.springframework.cloud.client.discovery.DiscoveryClient discovery,
            ObjectProvider<AbstractDiscoveryClientOptionalArgs<?>> transport, Environment env,
            LoadBalancerClient loadBalancer, RestTemplate loadBalanced) {
        this.eureka = eureka;
        this.infoManager = infoManager;
        this.discovery = discovery;
        this.transport = transport;
        this.env = env;
        this.loadBalancer = loadBalancer;
        this.loadBalanced = loadBalanced;
    }

    /** One line the test waits for: the port to steer the app on and the transport in use. */
    @EventListener(ApplicationReadyEvent.class)
    public void ready() {
        AbstractDiscoveryClientOptionalArgs<?> args = transport.getIfAvailable();
        System.out.println("MUSTER-READY port=" + env.getProperty("local.server.port")
                + " id=" + infoManager.getInfo().getInstanceId()
                + " transport=" + (args == null ? "none" : args.getClass().getSimpleName()));
        System.out.flush();
    }

    @GetMapping("/control/state")
    public Map<String, Object> state() {
        Map<String, Object> out = new LinkedHashMap<>();
        DiscoveryClient client = target();
        out.put("self", infoManager.getInfo().getInstanceId());
        out.put("reregister", counter(client, "REREGISTER_COUNTER"));
        out.put("mismatches", counter(client, "RECONCILE_HASH_CODES_MISMATCH"));
        Applications apps = eureka.getApplications();
        out.put("appsHashCode", apps == null ? null : apps.getAppsHashCode());
        List<Map<String, Object>> instances = new ArrayList<>();
        if (apps != null) {
            for (Application a : apps.getRegisteredApplications()) {
                for (InstanceInfo i : a.getInstancesAsIsFromEureka()) {
                    Map<String, Object> m = new LinkedHashMap<>();
                    m.put("app", i.getAppName());
                    m.put("id", i.getInstanceId());
                    m.put("status", String.valueOf(i.getStatus()));
                    m.put("overridden", String.valueOf(i.getOverriddenStatus()));
                    m.put("port", i.getPort());
                    m.put("metadata", new TreeMap<>(i.getMetadata()));
                    instances.add(m);
                }
            }
        }
        out.put("instances", instances);
        // What Spring's own DiscoveryClient hands to a load balancer.
        Map<String, List<String>> services = new TreeMap<>();
        for (String service : discovery.getServices()) {
            List<String> ids = new ArrayList<>();
            for (ServiceInstance si : discovery.getInstances(service)) ids.add(si.getInstanceId());
            Collections.sort(ids);
            services.put(service, ids);
        }
        out.put("services", services);
        return out;
    }

    /** Who answers: what a caller that found this app through Eureka reaches. */
    @GetMapping("/control/whoami")
    public String whoami() {
        return infoManager.getInfo().getInstanceId();
    }

    /**
     * A call to another service by its name, the way a Spring app makes one: Spring Cloud
     * LoadBalancer picks an instance from what the Eureka client fetched (what @LoadBalanced
     * clients do underneath), and the app calls that instance's /control/whoami.
     */
    @GetMapping("/control/call")
    public ResponseEntity<String> call(@RequestParam("service") String service) {
        ServiceInstance si = loadBalancer.choose(service);
        if (si == null) return ResponseEntity.status(503).body("no instance of " + service);
        try {
            HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create(si.getUri() + "/control/whoami"))
                    .timeout(Duration.ofSeconds(5)).build(), HttpResponse.BodyHandlers.ofString());
            return ResponseEntity.status(r.statusCode()).body(r.body());
        } catch (Exception e) {
            return ResponseEntity.status(502).body(si.getUri() + ": " + e);
        }
    }

    /**
     * The same call through the @LoadBalanced RestTemplate (ClientApp), as application code makes
     * it: http://SERVICE/control/whoami. Any failure (no instance, a refused connection, a
     * timeout, an error status) answers non-2xx, so the caller of this endpoint counts it.
     */
    @GetMapping("/control/lbcall")
    public ResponseEntity<String> lbcall(@RequestParam("service") String service) {
        try {
            return ResponseEntity.ok(loadBalanced.getForObject("http://" + service + "/control/whoami", String.class));
        } catch (RestClientResponseException e) {
            return ResponseEntity.status(e.getStatusCode()).body(e.getResponseBodyAsString());
        } catch (RuntimeException e) {
            return ResponseEntity.status(502).body(String.valueOf(e));
        }
    }

    /** The app's own status, as a health check would set it (not an override). */
    @PostMapping("/control/status")
    public String status(@RequestParam("value") String value) {
        infoManager.setInstanceStatus(InstanceInfo.InstanceStatus.valueOf(value));
        return "ok";
    }

    @PostMapping("/control/metadata")
    public String metadata(@RequestParam("key") String key, @RequestParam("value") String value) {
        infoManager.registerAppMetadata(Collections.singletonMap(key, value));
        return "ok";
    }

    private DiscoveryClient target() {
        Object o = eureka;
        try {
            while (o instanceof Advised advised) o = advised.getTargetSource().getTarget();
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
        return (DiscoveryClient) o;
    }

    /** A Spectator counter of DiscoveryClient's, -1 where it cannot be read. */
    static long counter(DiscoveryClient client, String name) {
        try {
            Field f = DiscoveryClient.class.getDeclaredField(name);
            f.setAccessible(true);
            return ((com.netflix.spectator.api.Counter) f.get(client)).count();
        } catch (ReflectiveOperationException | RuntimeException e) {
            return -1;
        }
    }
}
