package muster.interop.client;

import com.netflix.spectator.api.DefaultRegistry;
import com.netflix.spectator.api.Spectator;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;

/**
 * A Spring Cloud Eureka client app as a team writes one: the starter on the classpath, the Eureka
 * settings in application.properties and on the command line. The interop tests in interop/spring
 * steer it through its own HTTP port: Spring's /actuator/serviceregistry for status overrides, and
 * /control (ControlController) for what the client's registry holds and its counters.
 */
@SpringBootApplication
public class ClientApp {
    public static void main(String[] args) {
        // eureka-client 2.0 counts re-registrations and hashcode mismatches in Spectator's global
        // registry, which holds no registry of its own (its counters stay 0) until one is added.
        Spectator.globalRegistry().add(new DefaultRegistry());
        SpringApplication.run(ClientApp.class, args);
    }
}
