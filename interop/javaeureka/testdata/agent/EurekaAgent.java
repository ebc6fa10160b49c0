package musteragent;

import com.netflix.appinfo.ApplicationInfoManager;
import com.netflix.appinfo.EurekaInstanceConfig;
import com.netflix.appinfo.InstanceInfo;
import com.netflix.appinfo.InstanceInfo.InstanceStatus;
import com.netflix.appinfo.MyDataCenterInstanceConfig;
import com.netflix.appinfo.providers.EurekaConfigBasedInstanceInfoProvider;
import com.netflix.config.ConfigurationManager;
import com.netflix.discovery.CacheRefreshedEvent;
import com.netflix.discovery.DefaultEurekaClientConfig;
import com.netflix.discovery.DiscoveryClient;
import com.netflix.discovery.shared.Application;
import com.netflix.discovery.shared.Applications;
import com.netflix.servo.monitor.Counter;
import com.sun.jersey.api.client.ClientHandlerException;
import com.sun.jersey.api.client.ClientRequest;
import com.sun.jersey.api.client.ClientResponse;
import com.sun.jersey.api.client.filter.ClientFilter;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.reflect.Field;
import java.nio.charset.StandardCharsets;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.TreeMap;

/**
 * A long-running real DiscoveryClient (eureka-client 1.10, Jersey 1 transport) that a Go test steers
 * line by line on stdin ("ID COMMAND ARGS", answered "reply ID ...") while it registers, renews and
 * fetches on its own. The fixed-script driver in ../shared/java-eureka cannot keep a client alive
 * across a server restart, a failover or a migration; this can.
 *
 * Stdout: "wire METHOD URL -> STATUS" for every request the client makes (with the server's host:port,
 * so a test sees which server it uses), "refresh instances=N self=STATUS|absent hashcode=H" after
 * every registry fetch, and the replies.
 */
public class EurekaAgent {
    static synchronized void out(String s) {
        System.out.println(s);
        System.out.flush();
    }

    static class WireLog extends ClientFilter {
        @Override public ClientResponse handle(ClientRequest req) throws ClientHandlerException {
            String u = req.getURI().getScheme() + "://" + req.getURI().getHost() + ":" + req.getURI().getPort()
                    + req.getURI().getRawPath() + (req.getURI().getRawQuery() == null ? "" : "?" + req.getURI().getRawQuery());
            try {
                ClientResponse r = getNext().handle(req);
                out("wire " + req.getMethod() + " " + u + " -> " + r.getStatus());
                return r;
            } catch (ClientHandlerException e) {
                out("wire " + req.getMethod() + " " + u + " -> EXC " + e.getMessage());
                throw e;
            }
        }
    }

    static class LoopbackInstanceConfig extends MyDataCenterInstanceConfig {
        @Override public String getHostName(boolean refresh) { return "127.0.0.1"; }
        @Override public String getIpAddress() { return "127.0.0.1"; }
    }

    static InstanceInfo find(Applications apps, String app, String id) {
        if (apps == null) return null;
        Application a = apps.getRegisteredApplications(app);
        if (a == null) return null;
        for (InstanceInfo i : a.getInstancesAsIsFromEureka()) if (id.equals(i.getId())) return i;
        return null;
    }

    static long counter(DiscoveryClient c, String field) {
        try {
            Field f = DiscoveryClient.class.getDeclaredField(field);
            f.setAccessible(true);
            return ((Counter) f.get(c)).getValue().longValue();
        } catch (Exception e) {
            return -1;
        }
    }

    public static void main(String[] argv) throws Exception {
        Map<String, String> o = new LinkedHashMap<>();
        for (String a : argv) {
            int eq = a.indexOf('=');
            if (!a.startsWith("--") || eq < 0) throw new IllegalArgumentException("want --key=value, got " + a);
            o.put(a.substring(2, eq), a.substring(eq + 1));
        }
        String app = o.get("app").toUpperCase();
        String id = o.get("instance-id");
        String interval = o.getOrDefault("interval", "1");
        Map<String, String> p = new LinkedHashMap<>();
        p.put("eureka.region", "default");
        p.put("eureka.serviceUrl.default", o.get("url"));
        p.put("eureka.shouldUseDns", "false");
        p.put("eureka.registration.enabled", "true");
        p.put("eureka.shouldFetchRegistry", "true");
        p.put("eureka.client.refresh.interval", interval);
        p.put("eureka.appinfo.replicate.interval", interval);
        p.put("eureka.appinfo.initial.replicate.time", "1");
        p.put("eureka.shouldOnDemandUpdateStatusChange", "true");
        p.put("eureka.shouldFilterOnlyUpInstances", "false");
        p.put("eureka.printDeltaFullDiff", "false");
        p.put("eureka.name", app);
        p.put("eureka.instanceId", id);
        p.put("eureka.port", o.getOrDefault("port", "19900"));
        p.put("eureka.vipAddress", app.toLowerCase());
        p.put("eureka.lease.renewalInterval", interval);
        p.put("eureka.lease.duration", String.valueOf(3 * Integer.parseInt(interval)));
        p.put("eureka.metadata.agent", "musteragent");
        for (Map.Entry<String, String> e : o.entrySet()) if (e.getKey().startsWith("eureka.")) p.put(e.getKey(), e.getValue());
        p.forEach((k, v) -> ConfigurationManager.getConfigInstance().setProperty(k, v));

        EurekaInstanceConfig ic = new LoopbackInstanceConfig();
        InstanceInfo me = new EurekaConfigBasedInstanceInfoProvider(ic).get();
        ApplicationInfoManager aim = new ApplicationInfoManager(ic, me);
        DiscoveryClient.DiscoveryClientOptionalArgs args = new DiscoveryClient.DiscoveryClientOptionalArgs();
        args.setAdditionalFilters(Collections.singletonList(new WireLog()));
        DiscoveryClient[] holder = new DiscoveryClient[1];
        args.setEventListeners(Collections.singleton(event -> {
            if (!(event instanceof CacheRefreshedEvent) || holder[0] == null) return;
            Applications apps = holder[0].getApplications();
            InstanceInfo self = find(apps, app, id);
            int n = 0;
            for (Application a : apps.getRegisteredApplications()) n += a.getInstancesAsIsFromEureka().size();
            out("refresh instances=" + n + " self=" + (self == null ? "absent" : self.getStatus()) + " hashcode=" + apps.getAppsHashCode());
        }));
        DiscoveryClient client = new DiscoveryClient(aim, new DefaultEurekaClientConfig(), args);
        holder[0] = client;
        aim.setInstanceStatus(InstanceStatus.UP);
        out("ready " + id);

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line; (line = in.readLine()) != null; ) {
            String[] w = line.trim().split(" ");
            if (w.length < 2) continue;
            String reply;
            try {
                switch (w[1]) {
                    case "status":
                        aim.setInstanceStatus(InstanceStatus.valueOf(w[2]));
                        reply = "ok";
                        break;
                    case "meta":
                        aim.registerAppMetadata(Collections.singletonMap(w[2], w[3]));
                        reply = "ok";
                        break;
                    case "set": // a dynamic archaius property, e.g. eureka.serviceUrl.default
                        ConfigurationManager.getConfigInstance().setProperty(w[2], w[3]);
                        reply = "ok";
                        break;
                    case "find": { // the instance as this client's fetched registry has it
                        InstanceInfo i = find(client.getApplications(), w[2].toUpperCase(), w[3]);
                        reply = i == null ? "absent" : "status=" + i.getStatus() + " overridden=" + i.getOverriddenStatus()
                                + " meta=" + new TreeMap<>(i.getMetadata());
                        break;
                    }
                    case "counters":
                        reply = "reregister=" + counter(client, "REREGISTER_COUNTER")
                                + " mismatches=" + counter(client, "RECONCILE_HASH_CODES_MISMATCH");
                        break;
                    case "shutdown":
                        client.shutdown();
                        out("reply " + w[0] + " ok");
                        System.exit(0);
                        return;
                    default:
                        reply = "error unknown command " + w[1];
                }
            } catch (RuntimeException e) {
                reply = "error " + e;
            }
            out("reply " + w[0] + " " + reply);
        }
        client.shutdown();
    }
}
